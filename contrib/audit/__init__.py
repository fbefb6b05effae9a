"""The audit: every architecture gate of an upstream tree, judged for one target GPU.

Its stages are its folders, in the order they run:

* :mod:`contrib.audit.finding`: where a gate is (the analysis layer's gate parser),
  what it does to the target (:mod:`~contrib.audit.finding.effect`: an
  :class:`~contrib.audit.model.EffectKind`), and what code it keeps from the target
  (its own code, then the ordered :data:`~contrib.audit.finding.leads.LEADS`);
* :mod:`contrib.audit.classing`: the class of each excluding gate, from the CUDA its
  JIT modules build (the analysis layer's arch-guard reading), what its code reaches,
  and (``--compile``) PTX;
* :mod:`contrib.audit.stack`: the upstream below at the version this one pins
  (:mod:`~contrib.audit.stack.pins`), the walk of this tree's code into it
  (:mod:`~contrib.audit.stack.walk`), and the link of the two audits
  (:mod:`~contrib.audit.stack.link`).

:mod:`contrib.audit.engine` runs finding and classing over one tree of the upstream
cache, with a result cache; :mod:`contrib.audit.coverage` ties gates to patchsets and
to upstream history; :mod:`contrib.audit.run` does all of it for a workspace;
:mod:`contrib.audit.report` says it.  The working model is :mod:`contrib.audit.model`;
only :mod:`contrib.audit.serial` writes its JSON and cache forms and reads them back.
"""
