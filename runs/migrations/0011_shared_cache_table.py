"""The table of the database cache (evalhub/settings.py CACHES without REDIS_URL), created by
``migrate`` so no deployment step is forgotten; ``createcachetable`` skips it when it exists."""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("runs", "0010_notification_channels_deliveries")]

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop)]
