"""The pages under /jobs/: the list, submit (with its form), one job, its edit page and its buttons."""
