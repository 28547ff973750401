"""A DGD's event plane: a ZMQ broker on loopback, run by the kubelet in Dynamo's venv.

``python broker.py XSUB_PORT XPUB_PORT``. With ``DYN_ZMQ_BROKER_URL=xsub=tcp://127.0.0.1:XSUB ,
xpub=tcp://127.0.0.1:XPUB`` Dynamo's publishers connect to it instead of binding a port of their
own on every address (0.0.0.0, which ``DYN_EVENT_PLANE_HOST`` does not change), and its
subscribers read from it. ``zmq.proxy`` forwards in C: no CPU while nothing is published.
"""

import sys

import zmq

context = zmq.Context()
xsub, xpub = context.socket(zmq.XSUB), context.socket(zmq.XPUB)
xsub.bind(f"tcp://127.0.0.1:{int(sys.argv[1])}")
xpub.bind(f"tcp://127.0.0.1:{int(sys.argv[2])}")
zmq.proxy(xsub, xpub)
