"""The SQL of subscription rules, as Microsoft's "SQL filter syntax" and "SQL rule action syntax"
pages define it: compiled once per rule, evaluated per message. It imports nothing else of the
emulator (the broker's ``broker/rules.py`` applies it; other readers of messages can too).

The small API: ``rule.py`` (``compile_rule(...) -> CompiledRule``: ``.matches(props)``,
``.apply(props)``), built of ``sqlfilter.py`` (``compile_filter(text, parameters) -> SqlFilter``),
``sqlaction.py`` (``compile_action(text, parameters) -> SqlAction``) and ``correlation.py``
(``CorrelationFilter(fields)``); ``context.py`` what they read and write (``PropertySource``,
``PropertyTarget``, ``MessageProperties``). Beneath: ``lexer.py`` the words and ``SqlFilterError``,
``parser.py`` the grammar, ``semantics.py`` what the operators do, ``names.py`` the ``sys.`` properties.
"""
