"""CLI commands, one module per area; ``analyzer.cli`` registers them on the app. Each command is a thin shell: it
parses options (``commands.params`` types the numbers and choices), calls the library through its ``Store``
(``analyzer.library``), and prints."""
