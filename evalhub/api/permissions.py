from rest_framework.permissions import SAFE_METHODS, BasePermission


class ReadSignedInWriteStaff(BasePermission):
    """Reading needs a signed-in user; writing needs a staff user (session or token auth)."""

    message = "Sign in to read; writing needs a staff account."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or bool(user.is_staff)
