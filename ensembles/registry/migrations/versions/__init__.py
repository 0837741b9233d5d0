"""One module per schema revision (``rNNNN_*.py``); never edit a released one."""
