"""One-off studies behind figures in the docs. Unmaintained: see README.md beside this file."""
