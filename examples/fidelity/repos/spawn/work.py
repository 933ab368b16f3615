def square(x):
    return x * x


def hooked_value(_):
    # Importable only through the .pth's import hook (plant_hook.py): in a child that ran its .pth files.
    import hooked

    return hooked.VALUE
