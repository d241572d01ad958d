"""evalhub's URLs: the admin, the REST API with its OpenAPI schema, and the server-rendered pages."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("api/auth/", include("rest_framework.urls")),  # sign-in link on the browsable API
    path("api/", include("evalhub.api.urls")),
    path("", include("evalhub.pages")),
]

handler400 = "evalhub.errors.bad_request"
handler404 = "evalhub.errors.page_not_found"
handler500 = "evalhub.errors.server_error"
