"""`python -m engine` subcommands: say, register, serve."""
