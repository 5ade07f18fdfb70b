"""The site's templates (/manage/templates/): the starting points admins saved for everyone
from the submit page, with who saved each and when; deleting one is audited."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from people.models import SiteTemplate
from people.services import delete_site_template
from web.manage.access import staff_required


@staff_required
@require_GET
def site_templates(request: HttpRequest) -> HttpResponse:
    templates = SiteTemplate.objects.select_related("saved_by")
    return render(request, "web/manage/site_templates.html", {"templates": templates})


@staff_required
@require_POST
def site_template_delete(request: HttpRequest, template_id: int) -> HttpResponse:
    template = get_object_or_404(SiteTemplate, pk=template_id)
    delete_site_template(request.user, template)
    messages.success(request, f"Template {template.name!r} deleted.")
    return redirect("web:manage-templates")
