"""What the pytest plugin ``servicebus`` (``sbnotebook/pytest_plugin.py``) does once a test asks
for a namespace: loaded by its fixtures only, never when the plugin itself loads."""
