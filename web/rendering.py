"""How forms render: Django's templates, found through the TEMPLATES setting (so the
project's own ``templates/`` may override them), with each field in one box
(``templates/portal/partials/field.html``)."""

from __future__ import annotations

from django.forms.renderers import TemplatesSetting


class FieldBoxes(TemplatesSetting):
    field_template_name = "portal/partials/field.html"
