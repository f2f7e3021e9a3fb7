"""An upload handler that stops reading a request once its files exceed the configured size.

Django does not cap the total size of uploaded files (DATA_UPLOAD_MAX_MEMORY_SIZE excludes them),
so without this a client could fill the temporary folder before the form ever sees the files.
"""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload

MULTIPART_OVERHEAD = 1 << 20  # form fields and part headers on top of the files themselves


class SizeLimitHandler(FileUploadHandler):
    """Counts file bytes as they arrive; past ``LEADERBOARD_MAX_UPLOAD_BYTES`` it stops the upload."""

    def __init__(self, request=None):
        super().__init__(request)
        self.limit = settings.LEADERBOARD_MAX_UPLOAD_BYTES
        self.received = 0
        self.too_large = False

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length and content_length > self.limit + MULTIPART_OVERHEAD:
            self.too_large = True  # refuse on the first chunk, before anything is written

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.too_large or self.received > self.limit:
            self.too_large = True
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size):
        return None
