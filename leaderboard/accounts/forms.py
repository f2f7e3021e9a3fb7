"""Accounts: sign up and log in with an email address (stored lower-cased as the username)."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm


class SignUpForm(UserCreationForm):
    """Email and password; the email is the username."""

    email = forms.EmailField(max_length=150)

    class Meta:
        model = get_user_model()
        fields = ("email",)

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip().lower()
        if get_user_model().objects.filter(username__iexact=email).exists():
            raise forms.ValidationError("An account with this email already exists; log in instead.")
        return email

    def save(self, commit: bool = True):
        user = super().save(commit=False)
        user.username = user.email = self.cleaned_data["email"]
        if commit:
            user.save()
        return user

    def _post_clean(self):
        # UserCreationForm validates the password against the user; give it the username first.
        if "email" in self.cleaned_data:
            self.instance.username = self.cleaned_data["email"]
        super()._post_clean()


class EmailLoginForm(AuthenticationForm):
    """Log in with the email address (stored lower-cased as the username)."""

    username = forms.EmailField(label="Email", max_length=150, widget=forms.EmailInput(attrs={"autofocus": True}))

    def clean_username(self) -> str:
        """The account's username for this email address.

        Sign-up stores the address as the username. An account made otherwise (``createsuperuser``, the
        demo's ``admin`` with email ``admin@localhost``) has another username: the address finds it, so
        staff can sign in here too, as long as exactly one account has that address.
        """
        email = self.cleaned_data["username"].strip().lower()
        users = get_user_model().objects
        if not users.filter(username=email).exists():
            others = list(users.filter(email__iexact=email).values_list("username", flat=True)[:2])
            if len(others) == 1:
                return others[0]
        return email
