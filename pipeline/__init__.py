"""The commands: one package per command (run/, validate/, select/, report/,
export/, setup/) plus outputs/ (the output folder they share), and the
command line itself (cli.py runs, cli_parser.py parses). Stages live in
transforms/, contracts in schemas/; nothing there may import from here.
Keep this top level to six modules at most (tests/test_structure.py), and
`tasksieve.pipeline.cli:entry` working: it is the installed command.
"""
