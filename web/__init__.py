"""The portal's server-rendered pages: researcher pages (``researcher``) and admin pages
(``staff``), with the submit form (``jobform``) and the figures they show (``figures``)."""
