"""How forms render: Django's templates, found through the TEMPLATES setting (so the
project's own ``templates/`` may override them), with each field in one box
(``templates/web/partials/field.html``)."""

from __future__ import annotations

from django.forms.renderers import TemplatesSetting


class FieldBoxes(TemplatesSetting):
    field_template_name = "web/partials/field.html"
