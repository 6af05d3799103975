"""The @lower interpreter (NNEF 2.0 draft 2.12): executes a primitive operator from its formulas
(`interpreter.run_lower`), binding the invocation first (`bind`)."""
