"""The `graphrt` command: its parser, one module per subcommand, and OVMS's modes besides serving
(pull, configure, list/add/remove models in config.json)."""
