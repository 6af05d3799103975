"""NNEF 2.0 / SkriptND front end: grammar (skriptnd.lark), parser → ast, semantics, composition."""
