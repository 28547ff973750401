"""Dynamo's runtime for the sandbox's DGD pods: the venv that stands for Dynamo's images
(``venv.py``), what a pod's command runs in it (``engines.py``; GPU engines as Dynamo's mocker,
``worker.py``), tiny local models for Hugging Face ids (``model.py``) and a graph's event broker
(``broker.py``). ``worker.py`` and ``broker.py`` are scripts run with the venv's interpreter."""
