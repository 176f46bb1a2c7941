"""CLI commands, one module per area; ``analyzer.cli`` registers them on the app. Each command is a thin shell: it
parses options, calls the library, and prints."""
