"""The server process and its children: ``python -m app``'s launcher, the start-up checks
(:mod:`app.server.preflight`), what belongs to a server process (signals, logging set-up:
:mod:`app.server.process`) and the metrics folder server processes share."""
