"""Part I of the book: conservation laws of gradient flow, their count, and how steps break them."""
