"""The ``dragonet`` command (``cli.main``): the top tier, above both the webhook shell
(``webhooks``) and the simulator (``sim``), so that neither has to import the other."""
