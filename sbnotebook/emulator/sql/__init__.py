"""The SQL of subscription rules, as Microsoft's "SQL filter syntax" and "SQL rule action syntax"
pages define it: compiled once per rule, evaluated per message. It imports nothing else of the
emulator (the broker's ``broker/rules.py`` applies it; other readers of messages can too).

- ``sqlfilter.compile_filter(text, parameters) -> SqlFilter`` (``.matches(props)``)
- ``sqlaction.compile_action(text, parameters) -> SqlAction`` (``.apply(props)``)
- ``correlation.CorrelationFilter(fields)`` (``.matches(props)``)
- ``context``: what they read and write (``PropertySource``, ``PropertyTarget``, ``MessageProperties``)
- ``lexer`` the words and ``SqlFilterError``; ``parser`` the grammar; ``semantics`` the operators;
  ``names`` the ``sys.`` properties.
"""
