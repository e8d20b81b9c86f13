"""The web view: one static HTML page (plotly.js inlined: no server, no network) for a
simulated run (``dragonet simulate --html``) or a live pool's objects (``dragonet view``).

It lives in ``sim`` (it reads :mod:`sim.results`; the simulate command writes it when
``--html`` is given), below the CLI, which also runs ``dragonet view`` (``cli/view.py``);
the webhook shell never imports it. The live pool's page reads only the cluster's objects
(a dump's, or those ``live/`` lists for ``--live``), never a simulation.
"""
