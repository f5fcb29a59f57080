"""The chat's images, kept decoded for the turns after: an image is decoded when it is sent
(or when a stored conversation is first answered) and given to the model from memory after."""

from __future__ import annotations

import hashlib

from app.chat.lru import LruCache
from app.store.history import ImageRef
from engine import DecodedImage, load_image

DECODED_IMAGE_CACHE = 32


class ImageCache:
    """The last ``size`` images used, by the sha256 of their bytes (the store's name for them)."""

    def __init__(self, size: int = DECODED_IMAGE_CACHE) -> None:
        self._images: LruCache[str, DecodedImage] = LruCache(size)

    def decoded(self, ref: ImageRef) -> DecodedImage:
        key = ref.sha256
        image = self._images.get(key)
        if image is None:
            image = load_image(ref.read_bytes(), name=ref.path.name)
            self._images.put(key, image)
        return image

    def remember(self, data: bytes, image: DecodedImage) -> None:
        """Keep a just-sent image decoded: the store names it by the sha256 of its bytes."""
        self._images.put(hashlib.sha256(data).hexdigest(), image)
