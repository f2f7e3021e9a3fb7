from django.contrib import admin

from arena.models import LanguageModel


@admin.register(LanguageModel)
class LanguageModelAdmin(admin.ModelAdmin):
    list_display = ("name", "created_at")
    search_fields = ("name",)
