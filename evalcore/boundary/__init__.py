"""evalcore's boundary with the outside: what comes in is checked, what goes out is safe to open.

- :mod:`.validation`: argument checks at evalcore's public functions, one message everywhere;
- :mod:`.boundedjson`: JSON from untrusted files with a bound on nesting;
- :mod:`.csvsafe`: CSV cells that a spreadsheet will not run as formulas;
- :mod:`.defaults`: the defaults every entry point resolves the same way;
- :mod:`.netutil`: network-address helpers shared by the model client and the model server.

Each module stands alone: none imports another module of Podium.
"""
