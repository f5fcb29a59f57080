#!/bin/sh
# /usr/bin/hearth from the Debian package: the app is the PyInstaller bundle in /opt/hearth.
# A script rather than a symlink so the bundle's bootloader always sees its real path.
exec /opt/hearth/hearth "$@"
