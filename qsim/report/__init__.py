"""Reports: render results the stages computed (tables, matplotlib plots, HTML, JSON).

Nothing here computes a result a stage could provide; it only presents them.
"""
