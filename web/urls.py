"""Page URLs. Researcher pages need a login; ``/manage/`` pages need staff (403 otherwise)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from web import home, profile, signin, tokens, usage
from web.files import browse, changes
from web.interactive import pages as interactive
from web.jobs import detail, edit, index, submit, verbs
from web.manage import accounts, apps, audit, cluster, nodes, reservations, simulations, site_templates, users

app_name = "web"

urlpatterns = [
    path("", home.dashboard, name="home"),
    path("favicon.ico", home.favicon, name="favicon"),
    path("login/", signin.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("profile/", profile.profile, name="profile"),
    path("jobs/", index.job_list, name="job-list"),
    path("jobs/new/", submit.submit, name="job-submit"),
    path("jobs/cancel/", index.bulk_cancel, name="job-bulk-cancel"),
    path("jobs/templates/<int:template_id>/delete/", submit.delete_template, name="job-template-delete"),
    path("jobs/<int:job_id>/", detail.job_detail, name="job-detail"),
    path("jobs/<int:job_id>/log/", detail.job_log, name="job-log"),
    path("jobs/<int:job_id>/edit/", edit.job_edit, name="job-edit"),
    path("jobs/<int:job_id>/<slug:verb>/", verbs.job_verb, name="job-verb"),
    path("arrays/<int:array_job>/<slug:verb>/", verbs.array_verb, name="array-verb"),
    path("interactive/", interactive.interactive, name="interactive"),
    path("interactive/sessions/<int:job_id>/card/", interactive.card, name="interactive-card"),
    path("interactive/sessions/<int:job_id>/delete/", interactive.delete, name="interactive-delete"),
    path("interactive/<slug:slug>/", interactive.launch, name="interactive-launch"),
    path("files/", browse.files_page, name="files"),
    path("files/download/", browse.files_download, name="files-download"),
    path("files/upload/", changes.files_upload, name="files-upload"),
    path("files/mkdir/", changes.files_mkdir, name="files-mkdir"),
    path("files/delete/", changes.files_delete, name="files-delete"),
    path("usage/", usage.usage_page, name="usage"),
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", tokens.revoke_token, name="token-revoke"),
    path("manage/accounts/", accounts.accounts, name="manage-accounts"),
    path("manage/users/", users.users, name="manage-users"),
    path("manage/users/<int:user_id>/", users.user_quota, name="manage-user"),
    path("manage/accounts/new/", accounts.account_edit, name="manage-account-new"),
    path("manage/accounts/<int:account_id>/", accounts.account_edit, name="manage-account"),
    path("manage/accounts/<int:account_id>/preview/", simulations.preview_start, name="manage-account-preview"),
    path("manage/simulator/", simulations.simulator, name="manage-simulator"),
    path("manage/simulations/<int:simulation_id>/", simulations.simulation_page, name="manage-simulation"),
    path("manage/audit/", audit.audit_log, name="manage-audit"),
    path("manage/nodes/", nodes.nodes, name="manage-nodes"),
    path("manage/nodes/<int:node_id>/drain/", nodes.node_drain, name="manage-node-drain"),
    path("manage/nodes/<int:node_id>/resume/", nodes.node_resume, name="manage-node-resume"),
    path("manage/cluster/", cluster.cluster_overview, name="manage-cluster"),
    path("manage/reservations/", reservations.reservations, name="manage-reservations"),
    path("manage/reservations/<int:reservation_id>/", reservations.reservation_edit, name="manage-reservation"),
    path(
        "manage/reservations/<int:reservation_id>/delete/",
        reservations.reservation_delete,
        name="manage-reservation-delete",
    ),
    path("manage/templates/", site_templates.site_templates, name="manage-templates"),
    path(
        "manage/templates/<int:template_id>/delete/",
        site_templates.site_template_delete,
        name="manage-template-delete",
    ),
    path("manage/apps/", apps.apps, name="manage-apps"),
    path("manage/apps/new/", apps.app_edit, name="manage-app-new"),
    path("manage/apps/<int:app_id>/", apps.app_edit, name="manage-app"),
    path("manage/cluster/gpu-hours.csv", cluster.gpu_hours_csv, name="manage-gpu-hours-csv"),
]
