"""A simulated Android phone: launcher, a messenger, a food-delivery app and Settings.

Deterministic: the same calls give the same screens. Pages have named elements at
coordinates; labels depend on the UI language and positions on the language and screen
size; the input method rejects non-ASCII text (pinyin works). Screenshots are real
images drawn with Pillow.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from PIL import Image, ImageDraw

PINYIN = {"张三": "zhangsan", "李四": "lisi", "王五": "wangwu", "赵六": "zhaoliu", "孙七": "sunqi", "周八": "zhouba",
          "吴九": "wujiu", "郑十": "zhengshi", "钱一": "qianyi", "微信": "weixin", "美团": "meituan",
          "蜜雪冰城": "mixue", "瑞幸咖啡": "ruixing", "喜茶": "xicha", "奈雪": "naixue", "设置": "shezhi"}
CONTACTS = ["钱一", "Alice", "王五", "Bob", "Carol", "张三", "Dave", "李四", "Eve", "赵六", "Frank", "孙七",
            "Grace", "周八", "Heidi", "吴九", "Ivan", "郑十"]
SHOPS = ["蜜雪冰城", "瑞幸咖啡", "喜茶", "奈雪", "CoCo", "Tims"]
APPS = {  # app id: (zh name, en name, package, launcher page, slot)
    "wechat": ("微信", "WeChat", "com.tencent.mm", 2, 0),
    "meituan": ("美团", "Meituan", "com.sankuai.meituan", 2, 1),
    "settings": ("设置", "Settings", "com.android.settings", 1, 0),
    "photos": ("相册", "Photos", "com.android.gallery3d", 1, 1),
    "clock": ("时钟", "Clock", "com.android.deskclock", 1, 2),
    "calendar": ("日历", "Calendar", "com.android.calendar", 1, 3),
    "alipay": ("支付宝", "Alipay", "com.eg.android.AlipayGphone", 2, 2),
    "taobao": ("淘宝", "Taobao", "com.taobao.taobao", 2, 3),
}
LABELS = {  # key: (zh, en)
    "search": ("搜索", "Search"), "contacts": ("通讯录", "Contacts"), "chats": ("聊天", "Chats"),
    "allow": ("允许", "Allow"), "deny": ("拒绝", "Deny"), "message": ("发消息", "Message"),
    "add": ("加入购物车", "Add to cart"), "cart": ("购物车", "Cart"), "checkout": ("去结算", "Checkout"),
    "pay": ("提交订单", "Place order"), "display": ("显示", "Display"), "language": ("语言", "Language"),
    "bluetooth": ("蓝牙", "Bluetooth"), "wlan": ("无线网络", "Wi-Fi"), "dark": ("深色模式", "Dark mode"),
    "font": ("字体大小", "Font size"), "delivery": ("外卖", "Delivery"), "market": ("超市", "Market"),
    "me": ("我的", "Me"), "discover": ("发现", "Discover"), "search_box": ("搜索框", "Search box"),
    "input": ("输入框", "Input box"), "more": ("更多", "More"),
}
PAGE_NAMES = {  # page key: (zh, en) shown in observations
    "home": ("桌面", "Home screen"), "home2": ("桌面2", "Home screen 2"), "sys_search": ("全局搜索", "Device search"),
    "wx_perm": ("权限请求", "Permission"), "wx_home": ("微信首页", "WeChat home"),
    "wx_search": ("微信搜索", "WeChat search"),
    "wx_contacts": ("通讯录", "Contacts"), "wx_profile": ("详细资料", "Profile"), "wx_chat": ("聊天", "Chat"),
    "wx_discover": ("发现", "Discover"), "wx_me": ("我", "Me"),
    "mt_home": ("美团首页", "Meituan home"), "mt_search": ("美团搜索", "Meituan search"), "mt_shop": ("店铺", "Shop"),
    "mt_cart": ("购物车", "Cart"), "mt_checkout": ("确认订单", "Confirm order"), "mt_market": ("超市", "Market"),
    "mt_delivery": ("外卖", "Delivery"), "mt_me": ("我的", "Me"),
    "st_main": ("设置", "Settings"), "st_display": ("显示", "Display"), "st_language": ("语言", "Language"),
    "st_bt": ("蓝牙", "Bluetooth"), "st_wlan": ("无线网络", "Wi-Fi"),
}


@dataclass
class Element:
    """A visible, tappable (or typable) element with its box in screen pixels."""

    key: str
    label: str
    box: tuple[int, int, int, int]
    kind: str = "button"  # button | input | item | toggle

    @property
    def center(self) -> tuple[int, int]:
        """Where a tap lands."""
        x0, y0, x1, y1 = self.box
        return (x0 + x1) // 2, (y0 + y1) // 2

    def contains(self, x: float, y: float) -> bool:
        """Hit test."""
        x0, y0, x1, y1 = self.box
        return x0 <= x <= x1 and y0 <= y <= y1


@dataclass
class Result:
    """What a tool call returns: error flag, output, observation and screenshot."""

    ok: bool
    output: str
    observation: dict[str, Any]
    screenshot: bytes
    error: str | None = None


@dataclass
class SimPhone:
    """The phone. ``language`` and ``screen`` may change between tasks (the environment change)."""

    language: str = "zh-CN"
    screen: tuple[int, int] = (640, 1200)
    app: str = "launcher"
    page: str = "home"
    arg: str | None = None  # contact, shop, ...
    typed: str = ""
    scroll: int = 0
    cart: list[str] = field(default_factory=list)
    dark_mode: bool = False
    font_large: bool = False
    permissions: set[str] = field(default_factory=set)
    history: list[tuple[str, str, str | None, int]] = field(default_factory=list)
    render_images: bool = True

    # -- geometry and labels ---------------------------------------------------------

    @property
    def zh(self) -> bool:
        """Whether the UI is in Chinese."""
        return self.language.lower().startswith("zh")

    def label(self, key: str) -> str:
        """A UI label in the current language."""
        zh, en = LABELS[key]
        return zh if self.zh else en

    def app_name(self, app_id: str) -> str:
        """An app's display name in the current language."""
        zh, en = APPS[app_id][0], APPS[app_id][1]
        return zh if self.zh else en

    def _box(self, col: float, row: float, w: float = 0.4, h: float = 0.06) -> tuple[int, int, int, int]:
        # Layout in fractions of the screen; English layouts sit lower (the language change moves things).
        sw, sh = self.screen
        shift = 0.0 if self.zh else 0.045
        x0 = int(col * sw)
        y0 = int((row + shift) * sh)
        return x0, y0, int(x0 + w * sw), int(y0 + h * sh)

    def _search_page(self, kind: str, names: list[str]) -> list[Element]:
        """An in-app search page: the box, then the names matching what was typed (by pinyin or name)."""
        els = [Element("search_box", self.label("search_box"), self._box(0.05, 0.05, 0.9, 0.05), "input")]
        q = self.typed.lower()
        if q:
            hits = [n for n in names if q in (PINYIN.get(n, n.lower()), n.lower())]
            els += [Element(f"{kind}:{n}", n, self._box(0.05, 0.15 + 0.08 * i, 0.9, 0.07), "item")
                    for i, n in enumerate(hits)]
        return els

    def elements(self) -> list[Element]:
        """Elements of the current page, in on-screen order."""
        p, L, B = self.page, self.label, self._box
        if p in ("home", "home2"):
            page_no = 1 if p == "home" else 2
            els = [Element("search", L("search"), B(0.05, 0.04, 0.9, 0.05), "input")]
            for app_id, (_, _, _, pg, slot) in APPS.items():
                if pg == page_no:
                    els.append(Element(f"app:{app_id}", self.app_name(app_id), B(0.05 + 0.23 * slot, 0.2, 0.2, 0.1)))
            return els
        if p == "sys_search":
            els = [Element("search_box", L("search_box"), B(0.05, 0.04, 0.9, 0.05), "input")]
            q = self.typed.lower()
            if q:
                for n, (app_id, (zh, en, _, _, _)) in enumerate(APPS.items()):
                    if q in (PINYIN.get(zh, ""), en.lower(), app_id) or (q and PINYIN.get(zh, "").startswith(q)):
                        els.append(Element(f"app:{app_id}", self.app_name(app_id), B(0.05, 0.15 + 0.08 * n, 0.9)))
            return els
        if p == "wx_perm":
            return [Element("deny", L("deny"), B(0.1, 0.6, 0.35)), Element("allow", L("allow"), B(0.55, 0.6, 0.35))]
        if p == "wx_home":
            els = [Element("chat:王五", "王五", B(0.05, 0.15, 0.9, 0.07), "item"),
                   Element("chat:Alice", "Alice", B(0.05, 0.23, 0.9, 0.07), "item"),
                   Element("chats", L("chats"), B(0.02, 0.9, 0.22)),
                   Element("contacts", L("contacts"), B(0.26, 0.9, 0.22)),
                   Element("discover", L("discover"), B(0.5, 0.9, 0.22)), Element("me", L("me"), B(0.74, 0.9, 0.22)),
                   Element("search", L("search"), B(0.8, 0.05, 0.15, 0.05))]
            return els
        if p == "wx_search":
            return self._search_page("contact", CONTACTS)
        if p == "wx_contacts":
            visible = CONTACTS[self.scroll: self.scroll + 6]
            els = [Element(f"contact:{c}", c, B(0.05, 0.12 + 0.1 * i, 0.9, 0.08), "item")
                   for i, c in enumerate(visible)]
            return [*els, Element("chats", L("chats"), B(0.02, 0.9, 0.22)),
                    Element("contacts", L("contacts"), B(0.26, 0.9, 0.22))]
        if p == "wx_profile":
            return [Element("message", L("message"), B(0.1, 0.5, 0.8))]
        if p == "wx_chat":
            return [Element("input", L("input"), B(0.05, 0.85, 0.7), "input"),
                    Element("more", L("more"), B(0.8, 0.85, 0.15))]
        if p in ("wx_discover", "wx_me", "mt_market", "mt_delivery", "mt_me", "st_bt", "st_wlan", "st_language"):
            return [Element("more", L("more"), B(0.1, 0.3, 0.8))]
        if p == "mt_home":
            return [Element("delivery", L("delivery"), B(0.05, 0.15, 0.25, 0.08)),
                    Element("market", L("market"), B(0.35, 0.15, 0.25, 0.08)),
                    Element("me", L("me"), B(0.74, 0.9, 0.22)), Element("cart", L("cart"), B(0.5, 0.9, 0.22)),
                    Element("search", L("search"), B(0.05, 0.05, 0.9, 0.05), "input")]
        if p == "mt_search":
            return self._search_page("shop", SHOPS)
        if p == "mt_shop":
            return [Element("add", L("add"), B(0.55, 0.3, 0.4)), Element("cart", L("cart"), B(0.5, 0.9, 0.22)),
                    Element("checkout", L("checkout"), B(0.74, 0.9, 0.22))]
        if p == "mt_cart":
            return [Element("checkout", L("checkout"), B(0.6, 0.85, 0.35))]
        if p == "mt_checkout":
            return [Element("pay", L("pay"), B(0.55, 0.85, 0.4))]
        if p == "st_main":
            return [Element("wlan", L("wlan"), B(0.05, 0.12, 0.9, 0.07)), Element("bluetooth", L("bluetooth"),
                    B(0.05, 0.2, 0.9, 0.07)), Element("display", L("display"), B(0.05, 0.28, 0.9, 0.07)),
                    Element("language", L("language"), B(0.05, 0.36, 0.9, 0.07))]
        if p == "st_display":
            return [Element("dark", L("dark"), B(0.05, 0.12, 0.9, 0.07), "toggle"),
                    Element("font", L("font"), B(0.05, 0.2, 0.9, 0.07), "toggle")]
        return []

    # -- observation --------------------------------------------------------------------

    def page_name(self) -> str:
        """The page's display name (language dependent), with its argument."""
        zh, en = PAGE_NAMES[self.page]
        name = zh if self.zh else en
        return f"{name}:{self.arg}" if self.arg and self.page in ("wx_chat", "wx_profile", "mt_shop") else name

    def observe(self) -> dict[str, Any]:
        """What the runtime knows about the screen: app, page, package, visible text."""
        app = "Launcher" if self.app == "launcher" else self.app_name(self.app)
        pkg = "com.android.launcher" if self.app == "launcher" else APPS[self.app][2]
        obs: dict[str, Any] = {"app": app, "page": self.page_name(), "package": pkg,
                               "visible_text": [e.label for e in self.elements()]}
        if self.page in ("wx_chat",):
            obs["title"] = self.arg
        if self.app == "meituan":
            obs["cart_count"] = len(self.cart)
        if self.page == "mt_checkout":
            obs["order"] = list(self.cart)
        if self.page == "st_display":
            obs["dark_mode"] = self.dark_mode
            obs["font_large"] = self.font_large
        return obs

    def screenshot(self) -> bytes:
        """The screen drawn with Pillow, as JPEG bytes."""
        if not self.render_images:
            return b""
        w, h = self.screen
        bg = (30, 30, 30) if self.dark_mode else (245, 245, 245)
        img = Image.new("RGB", (w, h), bg)
        d = ImageDraw.Draw(img)
        d.rectangle([0, 0, w, int(0.03 * h)], fill=(60, 60, 60))
        d.text((10, 4), f"{self.app}/{self.page}", fill=(255, 255, 255))
        for e in self.elements():
            shade = 80 + (sum(e.key.encode()) * 7) % 150
            d.rectangle(list(e.box), outline=(0, 0, 0), fill=(shade, 180, 255 - shade // 2))
            d.text((e.box[0] + 6, e.box[1] + 6), e.label.encode("ascii", "replace").decode(), fill=(0, 0, 0))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=70)
        return buf.getvalue()

    def _result(self, ok: bool, output: str, error: str | None = None) -> Result:
        return Result(ok, output, self.observe(), self.screenshot(), error)

    # -- tools -------------------------------------------------------------------------

    def _go(self, app: str, page: str, arg: str | None = None) -> None:
        self.history.append((self.app, self.page, self.arg, self.scroll))
        self.app, self.page, self.arg = app, page, arg
        self.typed = "" if page not in ("home", "home2") else self.typed
        self.scroll = 0

    def _open_app(self, app_id: str) -> None:
        self.history.clear()
        if app_id == "wechat":
            self._go("wechat", "wx_home" if "wechat" in self.permissions else "wx_perm")
        elif app_id == "meituan":
            self._go("meituan", "mt_home")
        elif app_id == "settings":
            self._go("settings", "st_main")
        else:
            self._go(app_id, "home")
            self.page = "home"  # apps without pages: nothing to do there

    def call(self, tool: str, args: dict[str, Any]) -> Result:
        """Run one tool: touch_gesture, mouse_click, keyboard_text, launch_app, swipe, back, home."""
        if tool in ("home",) or (tool == "touch_gesture" and args.get("type") == "home"):
            self.app, self.page, self.arg, self.typed, self.scroll = "launcher", "home", None, "", 0
            self.history.clear()
            return self._result(True, "home")
        if tool == "back" or (tool == "touch_gesture" and args.get("type") == "back"):
            if self.history:
                self.app, self.page, self.arg, self.scroll = self.history.pop()
            else:
                self.app, self.page, self.arg = "launcher", "home", None
            self.typed = ""
            return self._result(True, "back")
        if tool == "launch_app":
            name = str(args.get("app", ""))
            app_id = next((a for a, v in APPS.items() if name == v[2]), None)
            if app_id is None:
                return self._result(False, "", f"no installed package named {name!r}")
            self._open_app(app_id)
            return self._result(True, f"launched {name}")
        if tool == "swipe":
            direction = args.get("direction") or ("up" if args.get("end", [0, 1])[1] < args.get("start", [0, 0])[1]
                                                   else "left")
            if self.page == "home" and direction == "left":
                self._go("launcher", "home2")
            elif self.page == "home2" and direction == "right":
                self._go("launcher", "home")
            elif self.page == "wx_contacts" and direction == "up":
                self.scroll = min(len(CONTACTS) - 6, self.scroll + 4)
            elif self.page == "wx_contacts" and direction == "down":
                self.scroll = max(0, self.scroll - 4)
            return self._result(True, f"swiped {direction}")
        if tool == "keyboard_text":
            text = str(args.get("text", ""))
            if not text.isascii():
                return self._result(False, "", "input method rejected non-ASCII text; type pinyin or English")
            inputs = [e for e in self.elements() if e.kind == "input"]
            if not inputs:
                return self._result(False, "", "no focused input field")
            if self.page == "home":
                self._go("launcher", "sys_search")
            elif self.page == "wx_home":
                self._go("wechat", "wx_search")
            elif self.page == "mt_home":
                self._go("meituan", "mt_search")
            self.typed = text
            return self._result(True, f"typed {text}")
        if tool in ("mouse_click", "touch_gesture", "tap"):
            x, y = float(args.get("x", -1)), float(args.get("y", -1))
            hit = next((e for e in self.elements() if e.contains(x, y)), None)
            if hit is None:
                return self._result(True, "tapped nothing")
            self._tap(hit)
            return self._result(True, f"tapped {hit.label}")
        return self._result(False, "", f"unknown tool {tool}")

    def _tap(self, e: Element) -> None:
        k = e.key
        if k.startswith("app:"):
            self._open_app(k[4:])
        elif self.page == "home" and k == "search":
            self._go("launcher", "sys_search")
        elif k == "allow":
            self.permissions.add("wechat")
            self.history.clear()
            self._go("wechat", "wx_home")
        elif k == "deny":
            self._go("launcher", "home")
        elif self.page == "wx_home" and k == "search":
            self._go("wechat", "wx_search")
        elif k == "contacts":
            self._go("wechat", "wx_contacts")
        elif k == "chats":
            self._go("wechat", "wx_home")
        elif k in ("discover", "me") and self.app == "wechat":
            self._go("wechat", "wx_discover" if k == "discover" else "wx_me")
        elif k.startswith("contact:"):
            name = k.split(":", 1)[1]
            self._go("wechat", "wx_chat" if self.page == "wx_search" else "wx_profile", name)
        elif k.startswith("chat:"):
            self._go("wechat", "wx_chat", k.split(":", 1)[1])
        elif k == "message":
            self._go("wechat", "wx_chat", self.arg)
        elif self.page == "mt_home" and k == "search":
            self._go("meituan", "mt_search")
        elif self.page == "mt_home" and k in ("delivery", "market", "me"):
            self._go("meituan", {"delivery": "mt_delivery", "market": "mt_market", "me": "mt_me"}[k])
        elif k.startswith("shop:"):
            self._go("meituan", "mt_shop", k.split(":", 1)[1])
        elif k == "add" and self.page == "mt_shop" and self.arg:
            self.cart.append(self.arg)
        elif k == "cart" and self.app == "meituan":
            self._go("meituan", "mt_cart")
        elif k == "checkout" and self.cart:
            self._go("meituan", "mt_checkout")
        elif self.page == "st_main":
            self._go("settings", {"display": "st_display", "language": "st_language", "bluetooth": "st_bt",
                                  "wlan": "st_wlan"}[k])
        elif k == "dark":
            self.dark_mode = not self.dark_mode
        elif k == "font":
            self.font_large = not self.font_large
