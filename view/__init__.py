"""The web view: one static HTML page (plotly.js inlined: no server, no network) for a
simulated run (``dragonet simulate --html``) or a live pool's objects (``dragonet view``).

It sits above ``sim`` (it reads :mod:`sim.results`) and beside the shell: ``webhooks/``
never imports it, and ``sim/`` only from the simulate command, when ``--html`` is given.
"""
