"""Plugins: each folder is a discord.py extension talking to the bot only through its services."""
