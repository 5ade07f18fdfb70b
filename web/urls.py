"""Page URLs. Researcher pages need a login; ``/manage/`` pages need staff (403 otherwise)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from web import jobedit, profile, researcher, reservations, signin, simulations, staff, usage, users

app_name = "web"

urlpatterns = [
    path("", researcher.dashboard, name="home"),
    path("login/", signin.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("profile/", profile.profile, name="profile"),
    path("jobs/", researcher.job_list, name="job-list"),
    path("jobs/new/", researcher.submit, name="job-submit"),
    path("jobs/cancel/", researcher.bulk_cancel, name="job-bulk-cancel"),
    path("jobs/templates/<int:template_id>/delete/", researcher.delete_template, name="job-template-delete"),
    path("jobs/<int:job_id>/", researcher.job_detail, name="job-detail"),
    path("jobs/<int:job_id>/log/", researcher.job_log, name="job-log"),
    path("jobs/<int:job_id>/edit/", jobedit.job_edit, name="job-edit"),
    path("jobs/<int:job_id>/<slug:verb>/", researcher.job_verb, name="job-verb"),
    path("arrays/<int:array_job>/<slug:verb>/", researcher.array_verb, name="array-verb"),
    path("usage/", usage.usage_page, name="usage"),
    path("tokens/", researcher.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", researcher.revoke_token, name="token-revoke"),
    path("manage/accounts/", staff.accounts, name="manage-accounts"),
    path("manage/users/", users.users, name="manage-users"),
    path("manage/users/<int:user_id>/", users.user_quota, name="manage-user"),
    path("manage/accounts/new/", staff.account_edit, name="manage-account-new"),
    path("manage/accounts/<int:account_id>/", staff.account_edit, name="manage-account"),
    path("manage/accounts/<int:account_id>/preview/", simulations.preview_start, name="manage-account-preview"),
    path("manage/simulator/", simulations.simulator, name="manage-simulator"),
    path("manage/simulations/<int:simulation_id>/", simulations.simulation_page, name="manage-simulation"),
    path("manage/audit/", staff.audit_log, name="manage-audit"),
    path("manage/nodes/", staff.nodes, name="manage-nodes"),
    path("manage/nodes/<int:node_id>/drain/", staff.node_drain, name="manage-node-drain"),
    path("manage/nodes/<int:node_id>/resume/", staff.node_resume, name="manage-node-resume"),
    path("manage/cluster/", staff.cluster_overview, name="manage-cluster"),
    path("manage/reservations/", reservations.reservations, name="manage-reservations"),
    path("manage/reservations/<int:reservation_id>/", reservations.reservation_edit, name="manage-reservation"),
    path(
        "manage/reservations/<int:reservation_id>/delete/",
        reservations.reservation_delete,
        name="manage-reservation-delete",
    ),
    path("manage/cluster/gpu-hours.csv", staff.gpu_hours_csv, name="manage-gpu-hours-csv"),
]
