"""Enumerations of the people side."""

from django.db import models


class Role(models.TextChoices):
    MEMBER = "member", "Member"
    COORDINATOR = "coordinator", "Coordinator"
