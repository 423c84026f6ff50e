"""edgec's command line: thin commands that parse, call a library function and render."""
