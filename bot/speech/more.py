"""What is said after text cut at a length limit; bot.config checks that the longest utterance still fits."""

MORE = ", and more"  # spoken after text cut by max_chars
