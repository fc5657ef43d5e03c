# pytester runs inner pytest sessions for the plugin's own tests.
pytest_plugins = ["pytester"]
