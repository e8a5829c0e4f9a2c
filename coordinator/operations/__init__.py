"""Operations that span components, one module per kind of request: each changes components in memory through
their own methods, commits (the unit of work journals what was touched) and settles before replying."""
