"""user_project/ holds a user's test module that the tests here copy into projects of their own
(pytester's, a throwaway venv's): it runs there, with the plugin as a user has it, never in this suite."""

collect_ignore = ["user_project"]
