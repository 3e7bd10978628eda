"""The application layer: `scan`, `fix_stdin`, `trace`, `advise`, `review`, `report` and `serve` take typed options
and return typed results, one module a command, imported from that module (`from portcheck.commands.scan import
scan`) so that a command loads only what it needs (`scan FILE` never loads the report's templates). No argument
parsing and no printing here (cli.py does both); the files a command is asked to change (`--fix`) are its work,
the reports it renders are cli.py's."""
