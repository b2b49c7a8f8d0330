"""Pieces that both parts of the book use: models, optimiser update rules, fits, checks."""
