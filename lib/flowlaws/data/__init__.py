"""Data for the book: what ships in packages, and readers for standard files the user gives."""
