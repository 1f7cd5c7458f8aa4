"""The SQL of subscription rules, as Microsoft's "SQL filter syntax" and "SQL rule action syntax"
pages define it: compiled once per rule, evaluated per message. It sits below the emulator and core
and imports nothing else of sbnotebook: the broker's ``emulator/broker/rules.py`` applies it to the
messages it routes, core's ``route`` to messages read or typed in a notebook.

The parts, top down (a part imports only from its own bullet and those below it):

- ``rule.py``: ``compile_rule(...) -> CompiledRule`` (``.matches(props)``, ``.apply(props)``,
  ``.explain(props)``);
- ``sqlfilter.py`` (``compile_filter(text, parameters) -> SqlFilter``), ``sqlaction.py``
  (``compile_action(text, parameters) -> SqlAction``), ``correlation.py`` (``CorrelationFilter(fields)``);
- ``explain.py``: why a filter did not match, the first clause that failed with the values it saw;
- ``parser.py``: the grammar, compiled to closures;
- ``semantics.py``: what the operators do; ``names.py``: the ``sys.`` properties; ``dotnet.py``:
  .NET's types on the wire (decimals, TimeSpan, DateTimeOffset) as filters compare them;
- ``lexer.py``: the words and ``SqlFilterError``; ``context.py``: what filters read and actions write
  (``PropertySource``, ``PropertyTarget``, ``MessageProperties``).
"""
