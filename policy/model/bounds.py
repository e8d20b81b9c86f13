"""Bounds no real job reaches, so that no object can make a sync's work unbounded.

The TFJob CRD states the same maximums (``crd/tfjobs.kubeflow.org.yaml``); the webhook
checks them too, for objects stored before the CRD had them, and answers a job beyond
them with a Failed condition that names the field.

* 1,024 pods of one replica type, and ``max-instances`` 1,024: parameter servers saturate
  long before. Every pod's TF_CONFIG lists ``max-instances`` workers, so a job's sync
  answers pods x max-instances addresses: about 45 MB at the bound (at 2^31, a worker
  grew by gigabytes and never answered).
* ``activeDeadlineSeconds`` 100 years: past any training run, and every deadline stays a
  date that a Kubernetes timestamp (and Python) can represent.
"""

MAX_REPLICAS = 1024
MAX_DEADLINE_SECONDS = 100 * 365 * 24 * 3600
# ttlSecondsAfterFinished is Kubeflow's int32.
MAX_TTL_SECONDS = 2**31 - 1
