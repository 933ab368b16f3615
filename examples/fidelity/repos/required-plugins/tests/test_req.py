def test_timeout_plugin_loaded(pytestconfig):
    assert pytestconfig.pluginmanager.hasplugin("timeout")


def test_no_cache(pytestconfig):
    assert not pytestconfig.pluginmanager.hasplugin("cacheprovider")
