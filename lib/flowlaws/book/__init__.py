"""The book's plumbing: runtime, progress, cache, style, tables and slider figures.

Nothing here imports the scientific subpackages of flowlaws (a test checks this).
"""
