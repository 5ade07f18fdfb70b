"""``qm``, Quartermaster's command-line client. It talks only to the REST API; see
:mod:`qm.cli`."""
